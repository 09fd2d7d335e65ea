"""Kubernetes as the second platform: render objects, read the cluster, apply with server-side apply."""
