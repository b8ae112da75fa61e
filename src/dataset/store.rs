//! Where a dataset lives: a local directory, or a prefix of an object store addressed by URL
//! (`s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`; `file:///path` and a
//! plain path are local), through Apache Arrow's `object_store`. Credentials come from each
//! cloud's standard environment and instance metadata (`AWS_*` variables, web identity and
//! IMDS; `GOOGLE_*` and the metadata server; `AZURE_*` and managed identity): no flag holds a
//! secret. A remote file is read with its footer first, then every column chunk a reader needs in
//! one batch of concurrent, coalesced range requests ([`RemoteFile::prefetch`]).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use bytes::{Buf, Bytes};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt as _};

/// Where a dataset lives.
#[derive(Clone, Debug)]
pub enum Location {
    /// A local directory.
    Local(PathBuf),
    /// A prefix of an object store.
    Remote(Remote),
}

/// A prefix of an object store.
#[derive(Clone)]
pub struct Remote {
    /// The URL, without a trailing slash (`s3://bucket/prefix`).
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: Key,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// A location that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL's scheme is not one of ours.
    #[error(
        "{url}: unsupported URL scheme {scheme:?} (use s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX, file:///PATH or a local path)"
    )]
    Scheme {
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// The URL has no bucket (or container).
    #[error("{0}: no bucket in the URL (s3://BUCKET/PREFIX)")]
    NoBucket(String),
    /// The object store client could not be built (a bad setting in the environment).
    #[error("{url}: {source}")]
    Client {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: object_store::Error,
    },
}

impl Location {
    /// Parses a dataset location: a URL of an object store, `file://`, or a local path.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        Self::parse_with(text, &[])
    }

    /// [`parse`](Self::parse), with `options` (object store configuration keys such as
    /// `aws_endpoint` or `google_service_account`, as `object_store` names them) applied over
    /// what the environment says: for embedding and tests.
    pub fn parse_with(text: &str, options: &[(&str, &str)]) -> Result<Self, StoreError> {
        let Some((scheme, rest)) = text.split_once("://") else {
            return Ok(Self::Local(PathBuf::from(text)));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "file" {
            return Ok(Self::Local(PathBuf::from(rest)));
        }
        let url = text.trim_end_matches('/').to_owned();
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(StoreError::NoBucket(text.to_owned()));
        }
        let client = |source| StoreError::Client {
            url: url.clone(),
            source,
        };
        let store: Arc<dyn ObjectStore> = match scheme.as_str() {
            "s3" | "s3a" => {
                let mut builder = object_store::aws::AmazonS3Builder::from_env();
                for (key, value) in options {
                    builder = builder.with_config(key.parse().map_err(client)?, *value);
                }
                Arc::new(
                    builder
                        .with_bucket_name(bucket)
                        .with_retry(retry())
                        .build()
                        .map_err(client)?,
                )
            }
            "gs" => {
                let mut builder = object_store::gcp::GoogleCloudStorageBuilder::from_env();
                for (key, value) in options {
                    builder = builder.with_config(key.parse().map_err(client)?, *value);
                }
                Arc::new(
                    builder
                        .with_bucket_name(bucket)
                        .with_retry(retry())
                        .build()
                        .map_err(client)?,
                )
            }
            "az" | "azure" | "abfs" | "abfss" => {
                let mut builder = object_store::azure::MicrosoftAzureBuilder::from_env();
                for (key, value) in options {
                    builder = builder.with_config(key.parse().map_err(client)?, *value);
                }
                Arc::new(
                    builder
                        .with_url(format!("{scheme}://{bucket}"))
                        .with_retry(retry())
                        .build()
                        .map_err(client)?,
                )
            }
            _ => {
                return Err(StoreError::Scheme {
                    url: text.to_owned(),
                    scheme,
                });
            }
        };
        Ok(Self::Remote(Remote {
            url,
            store,
            prefix: Key::parse(prefix.trim_matches('/'))
                .unwrap_or_else(|_| Key::from(prefix.trim_matches('/'))),
        }))
    }

    /// The location as given (a path, or the URL without a trailing slash).
    #[must_use]
    pub fn display(&self) -> String {
        match self {
            Self::Local(dir) => dir.display().to_string(),
            Self::Remote(remote) => remote.url.clone(),
        }
    }

    /// The root as a path: the directory, or the URL as a path (`s3://bucket/prefix`), under
    /// which the dataset's files are named in reports and errors.
    #[must_use]
    pub fn root(&self) -> PathBuf {
        match self {
            Self::Local(dir) => dir.clone(),
            Self::Remote(remote) => PathBuf::from(&remote.url),
        }
    }
}

/// Retries of one request inside the client: a few, within 15 s. A longer outage is the
/// uploader's to ride out (it retries each part with its own backoff, the files kept in the
/// spool), and a reader's to report, rather than one request hanging for minutes.
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig::default(),
        max_retries: 3,
        retry_timeout: Duration::from_secs(15),
    }
}

/// The runtime that drives object store requests for the synchronous readers and the uploader
/// (two worker threads, started on first use).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("object-store")
            .enable_all()
            .build()
            .expect("starting the object store runtime")
    })
}

/// Runs `future` to completion on the object store runtime, from a thread that is not one of a
/// runtime's workers (a reader thread, the uploader, a blocking task).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

/// One object of a listing.
#[derive(Clone, Debug)]
pub struct Object {
    /// Its name under the root, as a path (`s3://bucket/prefix/table=steps/...`).
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
}

impl Remote {
    /// The URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object key of `relative` (a path under the root, `/`-separated), taken as written:
    /// no character is percent-encoded, so the key is the one other readers of the bucket see.
    fn key(&self, relative: &str) -> Key {
        let joined = std::iter::once(self.prefix.as_ref())
            .chain(relative.split('/'))
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("/");
        Key::parse(&joined).unwrap_or_else(|_| Key::from(joined.as_str()))
    }

    /// The key of a path under the root (as [`Location::root`] names it).
    fn key_of(&self, path: &Path) -> Key {
        let relative = path
            .strip_prefix(&self.url)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.key(&relative)
    }

    /// Every object under `relative` (recursively), sorted by name.
    pub fn list(&self, relative: &str) -> Result<Vec<Object>, object_store::Error> {
        use futures_util::TryStreamExt as _;
        let under = self.key(relative);
        let mut objects: Vec<Object> =
            block_on(self.store.list(Some(&under)).try_collect::<Vec<_>>())?
                .into_iter()
                .map(|meta| {
                    let relative = meta.location.prefix_match(&self.prefix).map_or_else(
                        || meta.location.to_string(),
                        |parts| {
                            parts
                                .map(|p| p.as_ref().to_owned())
                                .collect::<Vec<_>>()
                                .join("/")
                        },
                    );
                    Object {
                        path: PathBuf::from(format!("{}/{relative}", self.url)),
                        size: meta.size,
                    }
                })
                .collect();
        objects.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(objects)
    }

    /// Uploads the local file `from` as `relative`, atomically: in one request when it fits in
    /// one part of `part_bytes`, else as a multipart upload completed only once every part is
    /// sent (no reader ever sees part of it; an interrupted upload is left to the bucket's
    /// lifecycle rule for incomplete uploads).
    pub fn upload(
        &self,
        from: &Path,
        relative: &str,
        part_bytes: usize,
    ) -> Result<u64, UploadError> {
        let data = std::fs::read(from).map_err(|source| UploadError::Read {
            path: from.to_owned(),
            source,
        })?;
        let size = data.len() as u64;
        let key = self.key(relative);
        let store = self.store.clone();
        let result = block_on(async move {
            if data.len() <= part_bytes {
                // One request, as atomic as a multipart upload's completion.
                return store
                    .put(&key, object_store::PutPayload::from(data))
                    .await
                    .map(|_| ());
            }
            let upload = store.put_multipart(&key).await?;
            let mut writer =
                object_store::WriteMultipart::new_with_chunk_size(upload, part_bytes.max(1));
            writer.write(&data);
            match writer.finish().await {
                Ok(_) => Ok(()),
                Err(error) => Err(error),
            }
        });
        result.map(|()| size).map_err(|source| UploadError::Store {
            url: format!("{}/{relative}", self.url),
            source,
        })
    }

    /// Opens the object at `path` (a path under [`Location::root`]) for reading: one request
    /// fetches its last 64 KiB (the footer, with the metadata of our files) and its size; a
    /// store that takes no suffix range (Azure) answers a `HEAD` and a range request instead.
    pub fn open(&self, path: &Path) -> Result<RemoteFile, object_store::Error> {
        let key = self.key_of(path);
        let store = self.store.clone();
        let options = object_store::GetOptions {
            range: Some(object_store::GetRange::Suffix(FOOTER_BYTES)),
            ..object_store::GetOptions::default()
        };
        let (size, range, bytes) = block_on(async {
            match store.get_opts(&key, options).await {
                Ok(result) => {
                    let (size, range) = (result.meta.size, result.range.clone());
                    Ok((size, range, result.bytes().await?))
                }
                Err(object_store::Error::NotSupported { .. }) => {
                    let size = store.head(&key).await?.size;
                    let range = size.saturating_sub(FOOTER_BYTES)..size;
                    let bytes = store.get_range(&key, range.clone()).await?;
                    Ok((size, range, bytes))
                }
                Err(error) => Err(error),
            }
        })?;
        Ok(RemoteFile {
            inner: Arc::new(Inner {
                store: self.store.clone(),
                key,
                size,
                cache: Mutex::new(vec![(range, bytes)]),
            }),
        })
    }
}

/// The bytes fetched from a file's end when it is opened: its footer and metadata.
const FOOTER_BYTES: u64 = 64 << 10;

/// The size of an upload's parts (S3 asks for at least 5 MiB but for the last).
pub const UPLOAD_PART_BYTES: usize = 8 << 20;

/// An upload that failed.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The local file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The object store refused or could not be reached.
    #[error("cannot upload {url}: {source}")]
    Store {
        /// The object's URL.
        url: String,
        /// Why.
        #[source]
        source: object_store::Error,
    },
}

/// An object being read: a Parquet `ChunkReader` that serves byte ranges from what
/// [`prefetch`](Self::prefetch) fetched, and fetches any other range on demand.
#[derive(Clone)]
pub struct RemoteFile {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn ObjectStore>,
    key: Key,
    size: u64,
    /// Fetched ranges and their bytes.
    cache: Mutex<Vec<(Range<u64>, Bytes)>>,
}

impl RemoteFile {
    /// Fetches `ranges` at once (the store coalesces neighbours and sends the requests
    /// concurrently) and keeps them for the reads that follow.
    pub fn prefetch(&self, ranges: Vec<Range<u64>>) -> Result<(), object_store::Error> {
        let ranges: Vec<Range<u64>> = ranges
            .into_iter()
            .map(|r| r.start.min(self.inner.size)..r.end.min(self.inner.size))
            .filter(|r| !r.is_empty())
            .collect();
        if ranges.is_empty() {
            return Ok(());
        }
        let fetched = block_on(self.inner.store.get_ranges(&self.inner.key, &ranges))?;
        self.inner
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(ranges.into_iter().zip(fetched));
        Ok(())
    }

    /// Forgets what was fetched.
    pub fn clear(&self) {
        self.inner
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// `range` from what was fetched; else fetched (and kept).
    fn bytes(&self, range: Range<u64>) -> parquet::errors::Result<Bytes> {
        if let Some(bytes) = self.cached(range.start, Some(range.end)) {
            return Ok(bytes);
        }
        let bytes = block_on(self.inner.store.get_range(&self.inner.key, range.clone()))
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        self.inner
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((range, bytes.clone()));
        Ok(bytes)
    }

    /// The fetched bytes from `start` to `end`, or, without `end`, to the end of the fetched range
    /// that holds `start` (a page reader reads on from there within its column chunk).
    fn cached(&self, start: u64, end: Option<u64>) -> Option<Bytes> {
        let cache = self
            .inner
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (have, bytes) = cache.iter().find(|(have, _)| {
            have.start <= start && end.map_or(start < have.end, |e| e <= have.end)
        })?;
        let from = usize::try_from(start - have.start).ok()?;
        let to = usize::try_from(end.unwrap_or(have.end) - have.start).ok()?;
        Some(bytes.slice(from..to))
    }
}

impl parquet::file::reader::Length for RemoteFile {
    fn len(&self) -> u64 {
        self.inner.size
    }
}

impl parquet::file::reader::ChunkReader for RemoteFile {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        // The rest of the prefetched column chunk holding `start`: never a request per page.
        match self.cached(start, None) {
            Some(bytes) => Ok(bytes.reader()),
            None => Ok(self.bytes(start..self.inner.size)?.reader()),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.bytes(start..start + length as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::{Location, StoreError};

    #[test]
    fn locations_parse_by_scheme() {
        assert!(
            matches!(Location::parse("shadow-data"), Ok(Location::Local(p)) if p.to_str() == Some("shadow-data"))
        );
        assert!(
            matches!(Location::parse("file:///data/shadow"), Ok(Location::Local(p)) if p.to_str() == Some("/data/shadow"))
        );
        match Location::parse("s3://bucket/fleet/shadow/") {
            Ok(Location::Remote(r)) => {
                assert_eq!(r.url(), "s3://bucket/fleet/shadow");
                assert_eq!(
                    r.key("table=steps/x.parquet").as_ref(),
                    "fleet/shadow/table=steps/x.parquet"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Location::parse("ftp://host/x"),
            Err(StoreError::Scheme { .. })
        ));
        assert!(matches!(
            Location::parse("s3:///x"),
            Err(StoreError::NoBucket(_))
        ));
    }
}
