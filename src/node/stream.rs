//! The socket under a node connection: TCP, a unix socket, or TLS over TCP; and the TLS
//! client configuration a node URL asks for.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;

pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream<TcpStream>>),
    /// Only while the stream is being upgraded to TLS.
    Gone,
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "node stream was lost in a TLS upgrade",
    )
}

impl Stream {
    /// Is the peer known to have closed the connection, or to have sent something unasked
    /// (an idle connection has nothing to read)? Checked without waiting, before an idle
    /// connection is handed out again. A TLS stream cannot be peeked at: `false`.
    pub fn closed_or_dirty(&self) -> bool {
        let mut byte = [0u8; 1];
        let r = match self {
            Stream::Tcp(s) => s.try_read(&mut byte),
            Stream::Unix(s) => s.try_read(&mut byte),
            Stream::Tls(_) => return false,
            Stream::Gone => return true,
        };
        !matches!(r, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Stream::Unix(_))
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Gone => Poll::Ready(Err(gone())),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Gone => Poll::Ready(Err(gone())),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Gone => Poll::Ready(Err(gone())),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Gone => Poll::Ready(Err(gone())),
        }
    }
}

/// What a node URL says about TLS (`require_ssl=true`, `verify_ca`, `verify_identity`, and
/// mysql_async's root-certificate and host-name options).
#[derive(Clone)]
pub struct Tls {
    pub connector: tokio_rustls::TlsConnector,
    /// The name the node's certificate is checked against.
    pub server_name: rustls::pki_types::ServerName<'static>,
}

impl Tls {
    /// The TLS settings of `opts`, `None` without `require_ssl`.
    pub async fn of(opts: &mysql_async::Opts) -> Result<Option<Tls>, String> {
        let Some(ssl) = opts.ssl_opts() else {
            return Ok(None);
        };
        let mut roots = rustls::RootCertStore::empty();
        if !ssl.disable_built_in_roots() {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        for cert in ssl.root_certs() {
            let data = cert
                .read()
                .await
                .map_err(|e| format!("root certificate: {e}"))?;
            let mut seen = false;
            use rustls::pki_types::pem::PemObject;
            for c in rustls::pki_types::CertificateDer::pem_slice_iter(&data) {
                let c = c.map_err(|e| format!("root certificate: {e}"))?;
                roots.add(c).map_err(|e| format!("root certificate: {e}"))?;
                seen = true;
            }
            if !seen {
                roots
                    .add(rustls::pki_types::CertificateDer::from(data.into_owned()))
                    .map_err(|e| format!("root certificate: {e}"))?;
            }
        }
        let roots = Arc::new(roots);
        let webpki = rustls::client::WebPkiServerVerifier::builder(roots.clone())
            .build()
            .map_err(|e| format!("TLS: {e}"))?;
        let mut config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(Verifier {
                accept_invalid: ssl.accept_invalid_certs(),
                skip_name: ssl.skip_domain_validation(),
                inner: webpki,
            }));
        let host = ssl
            .tls_hostname_override()
            .unwrap_or_else(|| opts.ip_or_hostname())
            .to_string();
        let server_name = rustls::pki_types::ServerName::try_from(host)
            .map_err(|e| format!("TLS server name: {e}"))?;
        Ok(Some(Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
        }))
    }
}

/// The node certificate check, relaxed as the URL asks (`verify_ca=false`: any certificate;
/// `verify_identity=false`: a valid certificate for another name).
#[derive(Debug)]
struct Verifier {
    accept_invalid: bool,
    skip_name: bool,
    inner: Arc<rustls::client::WebPkiServerVerifier>,
}

impl rustls::client::danger::ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if self.accept_invalid {
            return Ok(rustls::client::danger::ServerCertVerified::assertion());
        }
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) if self.skip_name => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
