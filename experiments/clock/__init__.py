"""The simulated clock: the cost model in closed form, the stored costs of this machine (calibration) and their
measurement. Costs are resolved before an engine starts; no engine measures anything here."""
