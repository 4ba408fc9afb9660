"""`graphene partition`, `graphene info`, `graphene list`."""
COMMANDS = []
