"""One module per section (or family of sections) of the report; :data:`SECTIONS` maps each experiment id to the
function that turns its data (experiments.report.load.Experiment) into a Section (Markdown and claims), in the
order the report shows them. An experiment not named here gets :func:`.generic.section_generic`."""

from __future__ import annotations

from experiments.report.sections.async_methods import (
    section_async_methods,
    section_async_methods_real,
)
from experiments.report.sections.base import Section
from experiments.report.sections.delay import section_artificial_delay
from experiments.report.sections.generic import section_generic
from experiments.report.sections.speedup import (
    section_lenet5_speedup,
    section_lr_speedup,
)
from experiments.report.sections.stragglers import section_stragglers
from experiments.report.sections.sync import section_large, section_sync_vs_async
from experiments.report.sections.tau import section_tau
from experiments.report.sections.timing import section_paper_timing
from experiments.report.sections.validation import section_model_validation

SECTIONS = {
    "lr_speedup": section_lr_speedup,
    "lenet5_speedup": section_lenet5_speedup,
    "allcnn_sync_vs_async": section_sync_vs_async,
    "artificial_delay": section_artificial_delay,
    "large_time_per_epoch": section_large,
    "large_accuracy": section_large,
    "tau_threshold": section_tau,
    "tau_threshold_lenet5": section_tau,
    "stragglers": section_stragglers,
    "model_validation": section_model_validation,
    "paper_timing": section_paper_timing,
    "async_methods": section_async_methods,
    "async_methods_real": section_async_methods_real,
}

__all__ = ["SECTIONS", "Section", "section_generic"]
