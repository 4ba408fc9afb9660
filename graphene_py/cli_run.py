"""`graphene run ALGO ...`."""
COMMANDS = []
