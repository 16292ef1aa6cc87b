"""The lesson layer of dspark-lab: the ten steps, their views, plots, widgets and the CLI."""
