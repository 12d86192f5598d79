from kfp import dsl

from jobaware.components import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def promote(key: str, version: str, tracking_uri: str) -> bool:
    """The promotion gate: champion moves to this version only if it passes (see jobaware.gate)."""
    from jobaware.steps import promote_step, use_tracking

    use_tracking(tracking_uri)
    return bool(promote_step(key, version)["promoted"])
