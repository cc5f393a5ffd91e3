"""What a cluster's controllers and drivers would do, for the sandbox API server: the Job,
JobSet and LeaderWorkerSet controllers' stand-in, kube-controller-manager's namespace
controller, garbage collector and resourceclaim controller, and what DRA drivers publish."""
