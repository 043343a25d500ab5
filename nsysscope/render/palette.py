"""The one palette: a colour per launch class, used by the figures and the HTML alike.

Okabe & Ito (2008), "Color Universal Design": safe for the common colour-vision
deficiencies. Plain hex strings, so HTML never needs matplotlib.
"""

from __future__ import annotations

from ..model import CLASS_TABLE, LaunchClass

OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7",
}

#: one colour per launch class (the class table's); a host block takes the class of the
#: launch it waited on
CLASS_COLORS: dict[str, str] = {r.klass: r.colour for r in CLASS_TABLE}
#: a class nsysscope does not know
UNKNOWN_COLOR = "#777777"
#: pass / fail, good / bad
OK_COLOR = CLASS_COLORS[LaunchClass.HEALTHY]
BAD_COLOR = CLASS_COLORS[LaunchClass.GPU_TO_CPU]
IMPROVED_COLOR = OKABE_ITO["blue"]


def class_color(klass: str) -> str:
    return CLASS_COLORS.get(klass, UNKNOWN_COLOR)


def is_light(klass: str) -> bool:
    """Whether ``class_color(klass)`` is light (text on it is black)."""
    known = LaunchClass.of(klass)
    return known is not None and known.row.light


def text_on(klass: str) -> str:
    """The text colour that reads on ``class_color(klass)``: black on a light one."""
    return "#000" if is_light(klass) else "#fff"
