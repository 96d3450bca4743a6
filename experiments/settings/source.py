"""Where a command line's primary config comes from (``--config-path``/``-cp``, ``--config-name``/``-cn``,
``--config-dir``/``-cd``): :class:`Source`, read by experiments/command_line.py and used to compose every job
(experiments/settings/compose.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from experiments.settings.defaults import CONF_DIR


@dataclass(frozen=True)
class Source:
    """Where the primary config comes from: ``config_dir`` (default conf/), ``config_name`` (default config) and
    extra folders searched for config groups (``--config-dir``)."""

    config_dir: str = str(CONF_DIR)
    config_name: str = "config"
    search_dirs: tuple[str, ...] = field(default_factory=tuple)

    @property
    def groups(self) -> frozenset[str]:
        """Config group names: the folders of the config dir and of the extra folders."""
        dirs = [Path(self.config_dir), *map(Path, self.search_dirs)]
        return frozenset(p.name for d in dirs if d.is_dir() for p in d.iterdir() if p.is_dir())

    @property
    def primary_dir(self) -> str:
        """The folder that holds the primary config: the config dir, else the first extra folder holding
        ``<config_name>.yaml`` (Hydra looks for it along the whole search path; its compose API only in the folder
        it is initialized with)."""
        stem = self.config_name.removesuffix(".yaml")
        return next(
            (d for d in self.search_dirs if not self._holds(self.config_dir, stem) and self._holds(d, stem)),
            self.config_dir,
        )

    @staticmethod
    def _holds(folder: str, stem: str) -> bool:
        return (Path(folder) / f"{stem}.yaml").is_file()

    def extra_overrides(self) -> list[str]:
        """The overrides that add the other folders (the extra ones, and the config dir when the primary config is
        in an extra one) to Hydra's search path."""
        others = [d for d in (self.config_dir, *self.search_dirs) if d != self.primary_dir]
        if not self.search_dirs:
            return []
        return ["hydra.searchpath=[" + ",".join(f"file://{Path(d).absolute()}" for d in others) + "]"]


DEFAULT = Source()
