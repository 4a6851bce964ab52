/* The first bytes of many small files, read in one call: a folder of tiny npy files (a network of
 * thousands of small tensors) without Python's objects between the system calls.
 *
 * heads(paths: list[str], size: int, flags: int) -> list of (data, st_size, st_mode, errno, call)
 *
 * For each path, as npyfile.read_npy_file does it: open(path, flags), fstat, and for a regular file
 * pread of up to `size` bytes at offset 0, then close. errno 0: `data` holds what pread read (None
 * for a file that is not regular: st_mode says what it is); else `errno` is that of the failing
 * call, `call` says which (0 open, 1 fstat, 2 pread) and data is None. The system calls run with the
 * GIL released. npyfile.read_npy_files turns these into read_npy_file's results and exceptions, and
 * reads a file itself where the first `size` bytes do not hold its header; read_npy_file is its
 * Python version (used when this module is absent), and the tests hold the two to the same results.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    Py_ssize_t got;  /* bytes read */
    long long size;
    unsigned int mode;
    int err, call;
} Head;

static PyObject *heads(PyObject *self, PyObject *args)
{
    PyObject *list;
    Py_ssize_t size;
    int flags;
    if (!PyArg_ParseTuple(args, "O!ni:heads", &PyList_Type, &list, &size, &flags))
        return NULL;
    if (size < 0 || size > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "heads(): size must be within 0 and 1 MB");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(list);
    PyObject **names = calloc(count ? count : 1, sizeof(PyObject *));
    Head *found = calloc(count ? count : 1, sizeof(Head));
    char *buf = malloc((count ? count : 1) * (size ? size : 1));
    PyObject *out = NULL;
    if (!names || !found || !buf) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < count; k++)  /* os.fsencode of each path, as os.open takes it */
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(list, k), &names[k]))
            goto done;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < count; k++) {
        Head *h = &found[k];
        int fd = open(PyBytes_AS_STRING(names[k]), flags);
        if (fd < 0) {
            h->err = errno;
            h->call = 0;
            continue;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
            h->err = errno;
            h->call = 1;
        } else {
            h->size = (long long)st.st_size;
            h->mode = (unsigned int)st.st_mode;
            if (S_ISREG(st.st_mode)) {
                ssize_t got;
                do
                    got = pread(fd, buf + k * size, (size_t)size, 0);
                while (got < 0 && errno == EINTR);
                if (got < 0) {
                    h->err = errno;
                    h->call = 2;
                } else {
                    h->got = (Py_ssize_t)got;
                }
            }
        }
        close(fd);
    }
    Py_END_ALLOW_THREADS
    out = PyList_New(count);
    for (Py_ssize_t k = 0; out && k < count; k++) {
        Head *h = &found[k];
        PyObject *data;
        if (h->err == 0 && S_ISREG(h->mode)) {
            data = PyBytes_FromStringAndSize(buf + k * size, h->got);
        } else {
            data = Py_None;
            Py_INCREF(data);
        }
        PyObject *item = data ? Py_BuildValue("(NLIii)", data, h->size, h->mode, h->err, h->call) : NULL;
        if (!item) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, k, item);
    }
done:
    if (names)
        for (Py_ssize_t k = 0; k < count; k++)
            Py_XDECREF(names[k]);
    free(names);
    free(found);
    free(buf);
    return out;
}

static PyMethodDef methods[] = {
    {"heads", heads, METH_VARARGS, "The first bytes, size and mode of many files (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_npyread", "The first bytes of many small files.", -1, methods};

PyMODINIT_FUNC PyInit__npyread(void) { return PyModule_Create(&module); }
