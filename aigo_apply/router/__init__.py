"""The router: HAProxy file rendering (pure, haproxy.py) and its deployment and reloads (deploy.py)."""
