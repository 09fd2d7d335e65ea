# Stands in for an engine image where a test needs running, labelled containers and nothing more:
# it accepts any command line (the vLLM arguments we generate) and idles until stopped, exiting at
# once on SIGTERM so that tests stay fast. The same through a `vllm` on the PATH: an engine that
# serves on a Unix socket is started as `sh -c '... exec vllm serve "$@"'` (its entry point), and
# then idles too (it serves nothing on the socket).
FROM aigo-test-base:bookworm
RUN printf '#!/bin/sh\ntrap "exit 0" TERM INT\nsleep infinity & wait\n' > /usr/local/bin/vllm && chmod 755 /usr/local/bin/vllm
ENTRYPOINT ["/bin/sh", "-c", "trap 'exit 0' TERM INT; sleep infinity & wait", "aigo-test-idle"]
