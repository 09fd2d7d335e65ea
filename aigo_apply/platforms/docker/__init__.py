"""The Docker driver: its platform, planning inputs, status, logs, the executor and its steps, the router's deployment."""
