"""Small helpers with no nsysscope dependencies: the bottom layer, importable from anywhere.

``progress`` draws the progress line of long loads, ``units`` formats times and shares for
people (the one place that decides how a time reads), ``version`` holds the package version.
"""
