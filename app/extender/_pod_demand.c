/*
 * pod_demand(pod, quantity) -> (cpu request, memory request, cpu limit, memory limit)
 *
 * The requests and limits of the Pod in a kube-scheduler request, summed as
 * kube-scheduler sums them (its effective requests): the larger of the running phase
 * (the app containers plus every sidecar, an init container with restartPolicy
 * Always) and the init phase (each regular init container plus the sidecars listed
 * before it; each sidecar with those before it), plus the pod overhead. ``quantity`` turns one quantity ("100m", "1Gi")
 * into a float; the extender passes its memoised parse_quantity, so there is one
 * parser of quantities, in Python.
 *
 * Why native code: the extender reserves a pod's estimate after every prioritize
 * answer in a burst, on its only thread, before it can read kube-scheduler's next
 * call. Walking the pod's JSON in Python is a dozen function calls whose code and
 * data are cold by then; here it is a few dictionary probes.
 *
 * demand_of_request_pod in app/extender/request_pod.py is the pure-Python twin, and
 * the reference: the same results and the same ValueError messages, held to that by
 * tests/extender/test_pod_demand.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *key_spec, *key_containers, *key_init_containers, *key_overhead;
static PyObject *key_resources, *key_requests, *key_limits, *key_cpu, *key_memory;
static PyObject *key_restart_policy, *text_always;

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

/* One container's amounts: 0 on both when it is not a map or has no resources. */
static int
resources_of(PyObject *container, PyObject *quantity, double requests[2], double limits[2])
{
    requests[0] = requests[1] = limits[0] = limits[1] = 0.0;
    if (!PyDict_Check(container)) {
        return 0;
    }
    PyObject *resources = PyDict_GetItemWithError(container, key_resources);
    if (resources == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    int truth = PyObject_IsTrue(resources);
    if (truth <= 0) {
        return truth;
    }
    Py_INCREF(resources); /* ``quantity`` is Python code */
    int failed = container_amounts(resources, quantity, requests, limits);
    Py_DECREF(resources);
    return failed;
}

/* Python's max(a, b): b only when strictly larger (so NaN behaves as in the twin). */
static inline double
larger(double a, double b)
{
    return b > a ? b : a;
}

/* Sum the app containers into request[] and limit[] (the running phase). */
static int
sum_containers(PyObject *items, PyObject *quantity, double request[2], double limit[2])
{
    for (Py_ssize_t i = 0; items != NULL && i < PyList_GET_SIZE(items); i++) {
        double requests[2], limits[2];
        if (resources_of(PyList_GET_ITEM(items, i), quantity, requests, limits) < 0) {
            return -1;
        }
        for (int r = 0; r < 2; r++) {
            request[r] += requests[r];
            limit[r] += limits[r];
        }
    }
    return 0;
}

/* Fold the init containers in: sidecars join the running phase; the init phase's peak
   (each init container with the sidecars started before it) is the floor of the
   result. */
static int
fold_init_containers(PyObject *items, PyObject *quantity, double request[2], double limit[2])
{
    double side_request[2] = {0.0, 0.0}, side_limit[2] = {0.0, 0.0};
    double peak_request[2] = {0.0, 0.0}, peak_limit[2] = {0.0, 0.0};
    for (Py_ssize_t i = 0; items != NULL && i < PyList_GET_SIZE(items); i++) {
        PyObject *container = PyList_GET_ITEM(items, i);
        double requests[2], limits[2];
        Py_INCREF(container);
        int failed = resources_of(container, quantity, requests, limits);
        int sidecar = 0;
        if (!failed && PyDict_Check(container)) {
            PyObject *policy = PyDict_GetItemWithError(container, key_restart_policy);
            if (policy == NULL && PyErr_Occurred()) {
                failed = -1;
            } else if (policy != NULL && PyUnicode_Check(policy)) {
                sidecar = PyUnicode_Compare(policy, text_always) == 0;
            }
        }
        Py_DECREF(container);
        if (failed < 0) {
            return -1;
        }
        for (int r = 0; r < 2; r++) {
            double phase_request, phase_limit;
            if (sidecar) {
                side_request[r] += requests[r];
                side_limit[r] += limits[r];
                request[r] += requests[r];
                limit[r] += limits[r];
                phase_request = side_request[r];
                phase_limit = side_limit[r];
            } else {
                phase_request = requests[r] + side_request[r];
                phase_limit = limits[r] + side_limit[r];
            }
            peak_request[r] = larger(peak_request[r], phase_request);
            peak_limit[r] = larger(peak_limit[r], phase_limit);
        }
    }
    for (int r = 0; r < 2; r++) {
        request[r] = larger(request[r], peak_request[r]);
        limit[r] = larger(limit[r], peak_limit[r]);
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
    int failed = sum_containers(containers, quantity, request, limit) < 0 ||
                 fold_init_containers(init_containers, quantity, request, limit) < 0 ||
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
    .m_doc = "The native pod demand reader (see demand_of_request_pod in request_pod.py).",
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
        {&key_restart_policy, "restartPolicy"},
        {&text_always, "Always"},
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
