"""What `make sync` regenerates from its sources, and the checks that fail when a generated file drifts.

prose.py           every number README, docs/ and the notebooks quote, filled from the data between markers
nbsync.py          the notebooks' .ipynb files, generated from their py:percent sources (outputs kept, checked)
nboutputs.py       the notebooks' committed outputs: each executed once, figures as small PNGs (make notebook-outputs)
diagrams.py        the mermaid map and 6B flow and the SVG maps, generated from the step registry
"""
