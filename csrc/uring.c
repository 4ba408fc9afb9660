/* Placeholder: the io_uring engine lands with the IO issue. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_uring", "io_uring engine (stub)", -1, NULL};
PyMODINIT_FUNC PyInit__uring(void) { return PyModule_Create(&mod); }
