"""Set-up progress bars: shown after a delay, off inside quiet_setup (which train(progress=False) enters)."""
from pyro_dag.progress import SETUP_PROGRESS_DELAY, quiet_setup, setup_progress


def test_bars_are_delayed_and_quiet_setup_turns_them_off():
    with setup_progress(3, "stage") as bar:
        assert not bar.disable and bar.delay == SETUP_PROGRESS_DELAY > 0
    with quiet_setup():
        with setup_progress(3, "stage") as bar:
            assert bar.disable
        with quiet_setup(False), setup_progress(3, "stage") as bar:
            assert not bar.disable
    with setup_progress(3, "stage") as bar:
        assert not bar.disable
