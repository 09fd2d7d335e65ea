"""The pure planner: plan types, host checks, GPU ledger, VRAM estimate, aigo.lock drift, the text view."""
