"""The platform seam (Platform, Console, requests) and what both drivers share: the run records (journal,
project lock, state folder), secrets, the host context, the router's keys, aigo.lock, the Hub's answers."""
