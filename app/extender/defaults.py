"""The extender's defaults that its flags show: here, apart from the modules that use
them (the web app, the reserve, the workload-usage follower, and what they import), so
that ``loadaware extender --help`` and a bad flag load none of those."""

# With the node cache, a request holds one pod and the nodes' names: a pod at etcd's
# 1.5 MiB limit and 5,000 names of 253 characters fit in 4 MiB, whose worst parse stays
# far below the 512Mi the manifests give. Without it, every Node object comes in the
# body (about 10 KiB each), and the memory limit must be sized for the cluster.
NODE_CACHE_MAX_BODY_BYTES = 4 * 1024 * 1024
FULL_NODES_MAX_BODY_BYTES = 64 * 1024 * 1024
# How long a pod's reservation waits for its binding to show in the pod watch.
RESERVATION_TTL_S = 15.0
# How often the annotator's workload-usage ConfigMap is read.
WORKLOAD_USAGE_REFRESH_S = 30.0
