"""The lab's printable handouts, Vietnamese and English, from the lesson's text files and the walk's data
(`make handouts`, `python -m lab.handouts`).

data.py     what the handouts print: each column's steps from the walk, the 6B worksheet's sampled round
pages.py    the HTML of each handout (A4, the DSpark Mono faces inline); handouts.css their style
build.py    the walk, chromium's print to PDF, the command
"""
