"""What the lab shows outside a notebook: pages that need no kernel, no install and no network.

presenter.py   `dspark-lab present`: the deck served on 127.0.0.1 (or written with --out); its server
deck.py        each step cut into builds (text → equation → figures → tables → checks) and the 6B narration
rounds.py      the scheduled speculative rounds of the deck's 6B pages, with what every cache holds after a commit
explorer.py    the DSpark Explorer: one static page (docs/explorer.html) that runs the lab model itself (window.dspark)
page.py        one self-contained page from a template, styles and scripts; the defaults both pages share
fonts.py       DSpark Mono, the embedded Vietnamese-complete monospace face (subset of free fonts, in fonts/)
pictures.py    `make pictures`: docs/img/*.png drawn by the lab's own pages in a headless chromium
*.html, *.css, *.js   the pages' templates, styles and scripts
"""
