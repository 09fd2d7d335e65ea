"""What runs now and what lies on disk, parsed into plain records: containers, model files, store markers."""
