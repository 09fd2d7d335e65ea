"""The Kubernetes driver: its platform, reading the cluster, server-side apply, rollout, prune, logs."""
