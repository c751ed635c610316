/*
 * pod_demand(pod, quantity) -> (cpu request, memory request, cpu limit, memory limit)
 *
 * The requests and limits of the Pod in a kube-scheduler request, summed as
 * kube-scheduler sums them: the larger of the containers' sum and the largest init
 * container, plus the pod overhead. ``quantity`` turns one quantity ("100m", "1Gi")
 * into a float; the extender passes its memoised parse_quantity, so there is one
 * parser of quantities, in Python.
 *
 * Why native code: the extender reserves a pod's estimate after every prioritize
 * answer in a burst, on its only thread, before it can read kube-scheduler's next
 * call. Walking the pod's JSON in Python is a dozen function calls whose code and
 * data are cold by then; here it is a few dictionary probes.
 *
 * demand_of_request_pod in app/extender/estimates.py is the pure-Python twin, and
 * the reference: the same results and the same ValueError messages, held to that by
 * tests/extender/test_pod_demand.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *key_spec, *key_containers, *key_init_containers, *key_overhead;
static PyObject *key_resources, *key_requests, *key_limits, *key_cpu, *key_memory;

/* One amount of a map: 0.0 when absent or null, else quantity(value). */
static int
amount(PyObject *amounts, PyObject *key, PyObject *quantity, double *out)
{
    *out = 0.0;
    PyObject *value = PyDict_GetItemWithError(amounts, key); /* borrowed */
    if (value == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (value == Py_None) {
        return 0;
    }
    PyObject *number = PyObject_CallOneArg(quantity, value);
    if (number == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) { /* unhashable, for the memo */
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "not a quantity: %R", value);
        }
        return -1;
    }
    *out = PyFloat_AsDouble(number);
    Py_DECREF(number);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* (cpu, memory) of a map of quantities; an empty or missing one is (0, 0). */
static int
pair(PyObject *amounts, PyObject *quantity, double *cpu, double *memory)
{
    *cpu = *memory = 0.0;
    if (amounts == NULL) {
        return 0;
    }
    int truth = PyObject_IsTrue(amounts);
    if (truth <= 0) {
        return truth;
    }
    if (!PyDict_Check(amounts)) {
        PyErr_Format(PyExc_ValueError, "not a map of quantities: %R", amounts);
        return -1;
    }
    if (amount(amounts, key_cpu, quantity, cpu) < 0) {
        return -1;
    }
    return amount(amounts, key_memory, quantity, memory);
}

/* A container's resources: requests[0..1] and limits[0..1] as (cpu, memory). */
static int
container_amounts(PyObject *resources, PyObject *quantity, double requests[2], double limits[2])
{
    if (!PyDict_Check(resources)) {
        PyErr_Format(PyExc_ValueError, "container resources are not a map: %R", resources);
        return -1;
    }
    PyObject *found = PyDict_GetItemWithError(resources, key_requests);
    if (found == NULL && PyErr_Occurred()) {
        return -1;
    }
    if (pair(found, quantity, &requests[0], &requests[1]) < 0) {
        return -1;
    }
    found = PyDict_GetItemWithError(resources, key_limits);
    if (found == NULL && PyErr_Occurred()) {
        return -1;
    }
    return pair(found, quantity, &limits[0], &limits[1]);
}

/* spec[key] as a list (NULL and no error: none), checked before any is summed. */
static int
container_list(PyObject *spec, PyObject *key, const char *name, PyObject **out)
{
    *out = NULL;
    PyObject *items = PyDict_GetItemWithError(spec, key);
    if (items == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    int truth = PyObject_IsTrue(items);
    if (truth <= 0) {
        return truth;
    }
    if (!PyList_Check(items)) {
        PyErr_Format(PyExc_ValueError, "spec.%s is not a list", name);
        return -1;
    }
    *out = items;
    return 0;
}

/* Fold each container's amounts into request[] and limit[]: summed, or with take_max
 * the largest (Python's max(a, b): b only when strictly larger). NULL items: none. */
static int
fold_containers(PyObject *items, PyObject *quantity, int take_max, double request[2],
                double limit[2])
{
    for (Py_ssize_t i = 0; items != NULL && i < PyList_GET_SIZE(items); i++) {
        PyObject *container = PyList_GET_ITEM(items, i);
        if (!PyDict_Check(container)) {
            continue;
        }
        PyObject *resources = PyDict_GetItemWithError(container, key_resources);
        if (resources == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            continue;
        }
        int truth = PyObject_IsTrue(resources);
        if (truth < 0) {
            return -1;
        }
        if (!truth) {
            continue;
        }
        double requests[2], limits[2];
        Py_INCREF(resources); /* ``quantity`` is Python code */
        int failed = container_amounts(resources, quantity, requests, limits);
        Py_DECREF(resources);
        if (failed < 0) {
            return -1;
        }
        for (int r = 0; r < 2; r++) {
            if (take_max) {
                request[r] = requests[r] > request[r] ? requests[r] : request[r];
                limit[r] = limits[r] > limit[r] ? limits[r] : limit[r];
            } else {
                request[r] += requests[r];
                limit[r] += limits[r];
            }
        }
    }
    return 0;
}

static PyObject *
pod_demand(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "pod_demand(pod, quantity) takes 2 arguments");
        return NULL;
    }
    PyObject *pod = args[0], *quantity = args[1];
    double request[2] = {0.0, 0.0}, limit[2] = {0.0, 0.0}, extra[2] = {0.0, 0.0};
    if (!PyDict_Check(pod)) {
        PyErr_SetString(PyExc_TypeError, "pod_demand: the pod must be a dict");
        return NULL;
    }
    PyObject *spec = PyDict_GetItemWithError(pod, key_spec);
    if (spec == NULL && PyErr_Occurred()) {
        return NULL;
    }
    if (spec == NULL || !PyDict_Check(spec)) {
        return Py_BuildValue("(dddd)", 0.0, 0.0, 0.0, 0.0);
    }
    /* Both lists are checked before any quantity is read, as in the Python twin. */
    PyObject *containers, *init_containers, *overhead;
    if (container_list(spec, key_containers, "containers", &containers) < 0 ||
        container_list(spec, key_init_containers, "initContainers", &init_containers) < 0) {
        return NULL;
    }
    overhead = PyDict_GetItemWithError(spec, key_overhead);
    if (overhead == NULL && PyErr_Occurred()) {
        return NULL;
    }
    if (overhead != NULL && !PyDict_Check(overhead)) {
        overhead = NULL; /* not a map: ignored */
    }
    /* Held while quantities are read: ``quantity`` is Python code. */
    Py_XINCREF(containers);
    Py_XINCREF(init_containers);
    Py_XINCREF(overhead);
    int failed = fold_containers(containers, quantity, 0, request, limit) < 0 ||
                 fold_containers(init_containers, quantity, 1, request, limit) < 0 ||
                 pair(overhead, quantity, &extra[0], &extra[1]) < 0;
    Py_XDECREF(overhead);
    Py_XDECREF(init_containers);
    Py_XDECREF(containers);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(dddd)", request[0] + extra[0], request[1] + extra[1],
                         limit[0] + extra[0], limit[1] + extra[1]);
}

static PyMethodDef pod_demand_methods[] = {
    {"pod_demand", (PyCFunction)(void (*)(void))pod_demand, METH_FASTCALL,
     "pod_demand(pod, quantity) -> (cpu request, memory request, cpu limit, memory limit)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pod_demand_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "app.extender._pod_demand",
    .m_doc = "The native pod demand reader (see demand_of_request_pod in estimates.py).",
    .m_size = -1,
    .m_methods = pod_demand_methods,
};

static int
intern_keys(void)
{
    struct {
        PyObject **key;
        const char *text;
    } keys[] = {
        {&key_spec, "spec"},
        {&key_containers, "containers"},
        {&key_init_containers, "initContainers"},
        {&key_overhead, "overhead"},
        {&key_resources, "resources"},
        {&key_requests, "requests"},
        {&key_limits, "limits"},
        {&key_cpu, "cpu"},
        {&key_memory, "memory"},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        *keys[i].key = PyUnicode_InternFromString(keys[i].text);
        if (*keys[i].key == NULL) {
            return -1;
        }
    }
    return 0;
}

PyMODINIT_FUNC
PyInit__pod_demand(void)
{
    if (intern_keys() < 0) {
        return NULL;
    }
    return PyModule_Create(&pod_demand_module);
}
