"""The simulated engine's settings for predicting a measured run (experiments/clock/predict.py ``clock_settings``)."""

from conftest import settings_for
from experiments.clock.predict import clock_settings


def test_a_prediction_under_real_compute_takes_the_measured_law_without_the_old_law_s_parameters(tmp_path):
    """Real compute is predicted with the measured compute-time law; the run's own lognormal ``sigma`` (or pareto
    ``shape``) is not the measured law's, and the settings refuse a law's parameter under another law: it is put back
    to the value that changes nothing (it kept it, and the prediction was lost to a validation error)."""
    run = settings_for(
        [
            f"results_dir={tmp_path}",
            "engine=shared_memory",
            "workers=2",
            "delay.law=lognormal",
            "delay.sigma=0.5",
            "engine.predict=true",
        ]
    )
    predicted = clock_settings(run, calibration=None)
    assert predicted.engine.name == "simulated" and predicted.engine.transport == "shared_memory"
    assert (predicted.delay.law, predicted.delay.sigma, predicted.delay.shape) == ("measured", 0.0, 1.5)
