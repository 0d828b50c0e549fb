"""What to tell a user whose gpuest has no generated modules (gpuest.v1)."""


def missing_generated_modules(error: ImportError) -> ImportError:
    return ImportError(
        f"gpuest.v1 (the generated protobuf modules) does not import ({error}): install "
        "the package (pip install ./python generates them), or in a build tree put "
        "build/python on PYTHONPATH beside python/")
