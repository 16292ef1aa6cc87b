"""What the lab shows outside a notebook: `explorer.py` writes the DSpark Explorer, one static HTML page."""
