from jobaware.failure.schema import NOT_LABELS, OUTCOMES, POST_RUN, SUBMIT_FIELDS
from jobaware.jobtable.schema import COLUMNS, STATES, UNFINISHED


def test_every_end_state_failure_reads_is_one_the_table_holds():
    assert set(OUTCOMES) | set(NOT_LABELS) <= set(STATES)
    assert not set(OUTCOMES) & set(UNFINISHED)  # an outcome is an end


def test_what_is_known_at_submit_and_after_the_run_split_the_columns():
    assert set(SUBMIT_FIELDS) | set(POST_RUN) == set(COLUMNS) and not set(SUBMIT_FIELDS) & set(POST_RUN)
