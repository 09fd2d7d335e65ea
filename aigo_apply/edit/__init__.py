"""The config-file editors: fmt, image tag, import/export, init and add, each writing aigo.yaml round-trip
(comments, order and spacing kept) and only what validates."""
