"""HTCondor's vocabulary: job event codes 000-047 and hold reason codes 1-48, by name and in words.

Names follow HTCondor's `ULogEventNumber` (src/condor_utils/condor_event.cpp) and the hold table of its
manual (docs/codes-other-values/hold-table.rst). A code above 47 is an event newer than this table; it is
kept, named `FUTURE_EVENT`, as the official reader does.
"""

from __future__ import annotations

EVENT_NAMES: tuple[str, ...] = (
    "SUBMIT", "EXECUTE", "EXECUTABLE_ERROR", "CHECKPOINTED", "JOB_EVICTED", "JOB_TERMINATED", "IMAGE_SIZE",
    "SHADOW_EXCEPTION", "GENERIC", "JOB_ABORTED", "JOB_SUSPENDED", "JOB_UNSUSPENDED", "JOB_HELD", "JOB_RELEASED",
    "NODE_EXECUTE", "NODE_TERMINATED", "POST_SCRIPT_TERMINATED", "GLOBUS_SUBMIT", "GLOBUS_SUBMIT_FAILED",
    "GLOBUS_RESOURCE_UP", "GLOBUS_RESOURCE_DOWN", "REMOTE_ERROR", "JOB_DISCONNECTED", "JOB_RECONNECTED",
    "JOB_RECONNECT_FAILED", "GRID_RESOURCE_UP", "GRID_RESOURCE_DOWN", "GRID_SUBMIT", "JOB_AD_INFORMATION",
    "JOB_STATUS_UNKNOWN", "JOB_STATUS_KNOWN", "JOB_STAGE_IN", "JOB_STAGE_OUT", "ATTRIBUTE_UPDATE", "PRESKIP",
    "CLUSTER_SUBMIT", "CLUSTER_REMOVE", "FACTORY_PAUSED", "FACTORY_RESUMED", "NONE", "FILE_TRANSFER",
    "RESERVE_SPACE", "RELEASE_SPACE", "FILE_COMPLETE", "FILE_USED", "FILE_REMOVED", "DATAFLOW_JOB_SKIPPED",
    "COMMON_FILES",
)
FUTURE_EVENT = "FUTURE_EVENT"
N_EVENT_CODES = len(EVENT_NAMES)  # 48: codes 0..47

JOB_TERMINATED, JOB_ABORTED, JOB_HELD, JOB_RELEASED = 5, 9, 12, 13

# HoldReasonCode: (name, what it means)
HOLD_CODES: dict[int, tuple[str, str]] = {
    1: ("UserRequest", "the user put the job on hold with condor_hold"),
    3: ("JobPolicy", "the job's PERIODIC_HOLD or ON_EXIT_HOLD expression was true"),
    4: ("CorruptedCredential", "the job's credentials are invalid"),
    5: ("JobPolicyUndefined", "a job policy expression evaluated to Undefined"),
    6: ("FailedToCreateProcess", "the starter failed to start the executable"),
    7: ("UnableToOpenOutput", "the standard output file could not be opened"),
    8: ("UnableToOpenInput", "the standard input file could not be opened"),
    9: ("UnableToOpenOutputStream", "the standard output stream could not be opened"),
    10: ("UnableToOpenInputStream", "the standard input stream could not be opened"),
    11: ("InvalidTransferAck", "an internal protocol error while transferring files"),
    12: ("TransferOutputError", "an error while transferring output or checkpoint files"),
    13: ("TransferInputError", "an error while transferring input files"),
    14: ("IwdError", "the initial working directory cannot be accessed"),
    15: ("SubmittedOnHold", "the user asked for the job to be submitted on hold"),
    16: ("SpoolingInput", "input files are being spooled"),
    17: ("JobShadowMismatch", "the job is not compatible with the shadow"),
    18: ("InvalidTransferGoAhead", "an internal protocol error while transferring files"),
    19: ("HookPrepareJobFailure", "the prepare-job hook failed"),
    20: ("MissedDeferredExecutionTime", "the job missed its deferred execution time"),
    21: ("StartdHeldJob", "the execute machine's WANT_HOLD policy held the job"),
    22: ("UnableToInitUserLog", "the job event log could not be initialised"),
    23: ("FailedToAccessUserAccount", "the user account could not be accessed"),
    24: ("NoCompatibleShadow", "no compatible shadow"),
    25: ("InvalidCronSettings", "invalid cron settings"),
    26: ("SystemPolicy", "the pool's SYSTEM_PERIODIC_HOLD policy held the job"),
    27: ("SystemPolicyUndefined", "the system periodic job policy evaluated to Undefined"),
    28: ("GlexecChownSandboxToUser", "glexec could not change the sandbox owner to the user"),
    29: ("PrivsepChownSandboxToUser", "privsep could not change the sandbox owner to the user"),
    30: ("GlexecChownSandboxToCondor", "glexec could not change the sandbox owner to condor"),
    31: ("PrivsepChownSandboxToCondor", "privsep could not change the sandbox owner to condor"),
    32: ("MaxTransferInputSizeExceeded", "the input files exceed MAX_TRANSFER_INPUT_MB"),
    33: ("MaxTransferOutputSizeExceeded", "the output files exceed MAX_TRANSFER_OUTPUT_MB"),
    34: ("JobOutOfResources", "the job used more memory or disk than provisioned"),
    35: ("InvalidDockerImage", "the Docker image is invalid"),
    36: ("FailedToCheckpoint", "the job failed when sent its checkpoint signal"),
    37: ("EC2UserError", "a user error in the EC2 universe"),
    38: ("EC2InternalError", "an internal error in the EC2 universe"),
    39: ("EC2AdminError", "an administrator error in the EC2 universe"),
    40: ("EC2ConnectionProblem", "a connection problem in the EC2 universe"),
    41: ("EC2ServerError", "a server error in the EC2 universe"),
    42: ("EC2InstancePotentiallyLost", "an EC2 instance was potentially lost"),
    43: ("PreScriptFailed", "the PRE script failed"),
    44: ("PostScriptFailed", "the POST script failed"),
    45: ("SingularityTestFailed", "the Singularity runtime test failed before launch"),
    46: ("JobDurationExceeded", "the job's allowed duration was exceeded"),
    47: ("JobExecuteExceeded", "the job's allowed execution time was exceeded"),
    48: ("HookShadowPrepareJobFailure", "the shadow's prepare-job hook asked for a hold"),
}
# Subcodes a pool's SYSTEM_PERIODIC_HOLD commonly uses for code 26, and HTCondor's own for code 34
POLICY_SUBCODES = {(26, 102): "excessive CPU usage", (26, 103): "memory usage exceeded request_memory",
                   (34, 102): "memory", (34, 104): "disk"}


def hold_reason_words(code: int | None, subcode: int | None = None) -> str:
    """A hold code (and subcode) in words: `13 TransferInputError: an error while transferring input files`."""
    if code is None:
        return "no hold code recorded"
    name, words = HOLD_CODES.get(int(code), ("Unknown", "a hold code this table does not know"))
    detail = POLICY_SUBCODES.get((int(code), int(subcode))) if subcode is not None else None
    if detail is None and code in (12, 13) and subcode:
        detail = "file-transfer plug-in timed out" if subcode == 62 else (
            f"plug-in exit code {subcode >> 8}" if subcode >= 256 else f"errno {subcode}")
    return f"{code} {name}: {words}" + (f" ({detail})" if detail else "")
