"""Kubernetes objects rendered from the desired state (pure): engine pods, storage, the router's objects,
secrets by reference, YAML out. Reading the cluster and applying are the driver's (platforms/kubernetes/)."""
