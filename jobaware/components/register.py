from kfp import dsl

from jobaware.components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def register(key: str, run_id: str, tracking_uri: str) -> str:
    """Register the run's model as a new version with alias `challenger`; return the version."""
    from jobaware.steps import register_step, use_tracking

    use_tracking(tracking_uri)
    return register_step(key, run_id)
