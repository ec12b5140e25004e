"""Records and speed measurements as the report reads them, for the report's and the command's tests."""

from __future__ import annotations


def fake_record(dataset, setting, test):
    return {"run": f"{dataset}-{setting}", "dataset": dataset, "setting": setting, "model": setting, "value": None,
            "steps": 10, "seconds": 60.0, "instances": 1280, "test": test, "settings": ["--seed", "1"]}


def fake_speed(gflops, gbs):
    return {"float32_gflops": gflops, "stream_gbs": gbs, "cores": 1, "time": "2026-11-25T11:00:00"}

