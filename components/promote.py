from kfp import dsl

from components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def promote(key: str, version: str, tracking_uri: str) -> bool:
    """The promotion gate: champion moves to this version only if it is at least as good."""
    from jobaware import tracking
    from jobaware.failure.steps import use_tracking

    use_tracking(tracking_uri)
    decision = tracking.promote(key, version)
    print(decision)
    return bool(decision["promoted"])
