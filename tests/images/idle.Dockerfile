# Stands in for an engine image where a test needs running, labelled containers and nothing more:
# it accepts any command line (the vLLM arguments we generate) and idles until stopped, exiting at
# once on SIGTERM so that tests stay fast.
FROM aigo-test-base:bookworm
ENTRYPOINT ["/bin/sh", "-c", "trap 'exit 0' TERM INT; sleep infinity & wait", "aigo-test-idle"]
