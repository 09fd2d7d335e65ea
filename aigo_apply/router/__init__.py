"""The router: HAProxy's files rendered (pure, haproxy.py, with its allowlist, metrics, swap and safety
checks). Deploying and reloading them is the Docker driver's (platforms/docker/router_deploy.py)."""
