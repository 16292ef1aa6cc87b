"""What the lab shows outside a notebook: `explorer.py` writes the DSpark Explorer, one static HTML page;
`presenter.py` serves presenter mode (`dspark-lab present`), whose 6B rounds come from `rounds.py`; `pictures.py`
makes the README's pictures in a headless browser (`make pictures`)."""
