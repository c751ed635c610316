# loadaware: one image for every component (`loadaware extender|annotator|demo|policy`).
FROM python:3.11-slim AS build
# gcc builds the extender's native verdict index (app/extender/_verdict_index.c).
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY app ./app
# The extension is optional for pip, not for the image: fail the build without it.
RUN pip install --no-cache-dir --prefix=/install . \
    && cd / && PYTHONPATH=/install/lib/python3.11/site-packages \
       python -c "import app.extender._verdict_index"

FROM python:3.11-slim
COPY --from=build /install /usr/local
# A fixed non-root UID, matching runAsUser in deploy/.
USER 65532:65532
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["loadaware"]
CMD ["--help"]
