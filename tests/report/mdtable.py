"""Read a Markdown table back into its cells (the report's tables are laid out by tabulate, padded)."""


def rows(markdown: str) -> list[list[str]]:
    """Every table line of ``markdown`` as its stripped cells (separator lines ``|:---|`` left out)."""
    out = []
    for line in markdown.splitlines():
        line = line.strip()
        if not line.startswith("|") or set(line) <= set("|:- "):
            continue
        cells = [c.strip().replace("\\|", "|") for c in line.replace("\\|", "\x00").strip("|").split("|")]
        out.append([c.replace("\x00", "|") for c in cells])
    return out


def row(markdown: str, first: str) -> list[str]:
    """The cells of the first table line whose first cell is ``first``."""
    return next(r for r in rows(markdown) if r[0] == first)
