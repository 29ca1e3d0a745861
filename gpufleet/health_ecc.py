"""ECC beyond the volatile counter: lifetime uncorrectable errors and retired memory pages."""

from __future__ import annotations

from typing import Any

from gpufleet.health_base import Finding, field_of, gpus_of, label


def check_ecc_lifetime(smi: Any) -> list[Finding]:
    """Review 2 N15. A reboot or driver reload zeroes the volatile counters but not the
    aggregate ones, which the InfoROM keeps for the board's life (NVIDIA, Dynamic Page
    Retirement: "the DBE addresses and counts are preserved across boots"). So:

    - any aggregate uncorrectable error fails: the memory has lost data before, whatever the
      volatile counter says since the last boot; run the field diagnostic before trusting it;
    - a page retirement pending a GPU reset fails (the faulty page is still in use);
    - retired pages and correctable errors, volatile or aggregate, are reported (info).
    """
    findings = []
    for index, gpu in enumerate(gpus_of(smi)):
        who = label(index, gpu)
        lifetime = field_of(gpu, "ecc_uncorrected_aggregate")
        if lifetime is not None and int(lifetime) > 0:
            findings.append(
                Finding(
                    "ecc_lifetime",
                    "fail",
                    f"{who}: {lifetime} uncorrectable ECC error(s) over the board's life "
                    "(aggregate counter); run `dcgmi diag -r 3` or NVIDIA's field diagnostic "
                    "before returning it to service",
                    gpu=str(index),
                    figures={"ecc_uncorrected_aggregate": int(lifetime)},
                )
            )
        if field_of(gpu, "retired_pages_pending"):
            findings.append(
                Finding(
                    "ecc_lifetime",
                    "fail",
                    f"{who}: a retired memory page waits for a GPU reset (pending blacklist); "
                    "drain the GPU and reset it (nvidia-smi -r) or reboot",
                    gpu=str(index),
                    figures={"retired_pages_pending": True},
                )
            )
        counts = {
            key: int(field_of(gpu, key))
            for key in ("retired_pages", "ecc_corrected_volatile", "ecc_corrected_aggregate")
            if field_of(gpu, key) is not None and int(field_of(gpu, key)) > 0
        }
        if counts:
            shown = ", ".join(f"{k} {v}" for k, v in counts.items())
            findings.append(
                Finding("ecc_lifetime", "info", f"{who}: {shown}", gpu=str(index), figures=counts)
            )
    return findings
