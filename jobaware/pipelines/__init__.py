"""KFP pipelines, one per capability plus `all`, and the runner that runs or submits them."""
