# loadaware: one image for every component (`loadaware extender|annotator|demo|policy`).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
# A fixed non-root UID, matching runAsUser in deploy/.
USER 65532:65532
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["loadaware"]
CMD ["--help"]
