//! Authentication plugin data: `mysql_native_password`, `caching_sha2_password`
//! (scramble, and the RSA-encrypted password of its full authentication).

use std::panic::{catch_unwind, AssertUnwindSafe};

use mysql_common::crypto::der::{parse_pub_key, PubKeyFileType};
use mysql_common::crypto::rsa::{GetRandom, Pkcs1OaepPadding, PublicKey};
use mysql_common::packets::AuthPlugin;
use mysql_common::scramble::{scramble_native, scramble_sha256};

use crate::Error;

/// The plugins this client can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plugin {
    Native,
    CachingSha2,
}

impl Plugin {
    pub(crate) fn from_auth_plugin(plugin: &AuthPlugin<'_>) -> Result<Plugin, Error> {
        match plugin {
            AuthPlugin::MysqlNativePassword => Ok(Plugin::Native),
            AuthPlugin::CachingSha2Password => Ok(Plugin::CachingSha2),
            other => Err(Error::Auth(format!(
                "the server asks for the auth plugin {:?}, which this client does not support \
                 (supported: mysql_native_password, caching_sha2_password)",
                String::from_utf8_lossy(other.as_bytes())
            ))),
        }
    }

    pub(crate) fn name(self) -> &'static [u8] {
        match self {
            Plugin::Native => b"mysql_native_password",
            Plugin::CachingSha2 => b"caching_sha2_password",
        }
    }

    /// The scrambled password for this plugin and nonce (empty for an empty
    /// password, as the protocol wants).
    pub(crate) fn scramble(self, password: &str, nonce: &[u8]) -> Vec<u8> {
        let pass = password.as_bytes();
        let out = match self {
            Plugin::Native => scramble_native(nonce, pass).map(|s| s.to_vec()),
            Plugin::CachingSha2 => scramble_sha256(nonce, pass).map(|s| s.to_vec()),
        };
        out.unwrap_or_default()
    }
}

/// `caching_sha2_password` full authentication without TLS: the
/// NUL-terminated password XORed with the nonce, RSA-OAEP(SHA-1) encrypted
/// with the server's public key (PEM), as MySQL's client does.
pub(crate) fn encrypt_password(password: &str, nonce: &[u8], pem: &[u8]) -> Result<Vec<u8>, Error> {
    if nonce.is_empty() {
        return Err(Error::Auth(
            "empty nonce for RSA password encryption".into(),
        ));
    }
    let mut block: Vec<u8> = password.as_bytes().to_vec();
    block.push(0);
    for (i, b) in block.iter_mut().enumerate() {
        *b ^= nonce[i % nonce.len()];
    }
    let key = public_key_from_pem(pem)?;
    // OAEP with SHA-1: at most k - 2*20 - 2 bytes of message.
    let k = key.num_octets();
    if k < 42 || block.len() > k - 42 {
        return Err(Error::Auth(format!(
            "password too long for the server's {}-bit RSA key",
            k * 8
        )));
    }
    catch_unwind(AssertUnwindSafe(|| {
        key.encrypt_block(&block, Pkcs1OaepPadding::new(GetRandom))
    }))
    .map_err(|_| Error::Auth("RSA encryption of the password failed".into()))
}

/// Parses a PEM RSA public key (PKCS#1 or SubjectPublicKeyInfo).
///
/// Not `PublicKey::from_pem`: that compiles two regexes on every call
/// (CPU and a deep stack, in a coroutine) and panics on bad input. The DER
/// parser it uses also panics on malformed input; that panic is caught and
/// reported as [`Error::Auth`].
fn public_key_from_pem(pem: &[u8]) -> Result<PublicKey, Error> {
    let bad = || Error::Auth("the server's RSA public key is not valid PEM".into());
    let text = std::str::from_utf8(pem).map_err(|_| bad())?;
    let (kind, after_begin) = if let Some(i) = text.find("-----BEGIN RSA PUBLIC KEY-----") {
        (PubKeyFileType::Pkcs1, &text[i + 30..])
    } else if let Some(i) = text.find("-----BEGIN PUBLIC KEY-----") {
        (PubKeyFileType::Pkcs8, &text[i + 26..])
    } else {
        return Err(bad());
    };
    let body = &after_begin[..after_begin.find("-----END").ok_or_else(bad)?];
    let der = base64_decode(body).ok_or_else(bad)?;
    let (modulus, exponent) =
        catch_unwind(AssertUnwindSafe(|| parse_pub_key(&der, kind))).map_err(|_| bad())?;
    Ok(PublicKey::new(modulus, exponent))
}

/// Standard base64 with padding; whitespace ignored.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits, mut padding) = (0u32, 0u32, 0usize);
    for c in text.bytes().filter(|c| !c.is_ascii_whitespace()) {
        if c == b'=' {
            padding += 1;
            continue;
        }
        if padding > 0 {
            return None;
        }
        acc = (acc << 6) | value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    (padding <= 2).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    // Vector from mysql_common's own scramble tests (src/scramble.rs).
    const NONCE: [u8; 20] = [
        0x4e, 0x52, 0x33, 0x48, 0x50, 0x3a, 0x71, 0x49, 0x59, 0x61, 0x5f, 0x39, 0x3d, 0x64, 0x62,
        0x3f, 0x53, 0x64, 0x7b, 0x60,
    ];
    const PASSWORD: &str = "G!ider27";

    #[test]
    fn native_scramble_known_vector() {
        assert_eq!(
            Plugin::Native.scramble(PASSWORD, &NONCE),
            [
                0x09, 0xcf, 0xf8, 0x85, 0x5e, 0x9e, 0x70, 0x53, 0x40, 0xff, 0x22, 0x70, 0xd8, 0xfb,
                0x9f, 0xad, 0xba, 0x90, 0x6b, 0x70,
            ]
        );
    }

    /// MariaDB cannot serve caching_sha2_password, so its fast path is checked
    /// against a known vector instead of a live server.
    #[test]
    fn caching_sha2_scramble_known_vector() {
        assert_eq!(
            Plugin::CachingSha2.scramble(PASSWORD, &NONCE),
            [
                0x4f, 0x97, 0xbb, 0xfd, 0x20, 0x24, 0x01, 0xc4, 0x2a, 0x69, 0xde, 0xaa, 0xe5, 0x3b,
                0xda, 0x07, 0x7e, 0xd7, 0x57, 0x85, 0x63, 0xc1, 0xa8, 0x0e, 0xb8, 0x16, 0xc8, 0x21,
                0x19, 0xb6, 0x8d, 0x2e,
            ]
        );
    }

    #[test]
    fn empty_password_sends_empty_auth_data() {
        assert!(Plugin::Native.scramble("", &NONCE).is_empty());
        assert!(Plugin::CachingSha2.scramble("", &NONCE).is_empty());
    }

    #[test]
    fn unsupported_plugin_is_an_auth_error() {
        let err = Plugin::from_auth_plugin(&AuthPlugin::Ed25519).unwrap_err();
        assert!(
            matches!(err, Error::Auth(ref m) if m.contains("client_ed25519")),
            "{err}"
        );
    }

    #[test]
    fn malformed_public_key_is_an_auth_error() {
        for pem in [
            &b"not a key"[..],
            b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
            b"-----BEGIN PUBLIC KEY-----\n!!\n-----END PUBLIC KEY-----\n",
        ] {
            let err = encrypt_password("pw", &NONCE, pem).unwrap_err();
            assert!(matches!(err, Error::Auth(_)), "{err}");
        }
    }

    #[test]
    fn base64() {
        assert_eq!(base64_decode("TWFu").unwrap(), b"Man");
        assert_eq!(base64_decode("TWE=\n").unwrap(), b"Ma");
        assert_eq!(base64_decode("T Q==").unwrap(), b"M");
        assert!(base64_decode("TQ=x").is_none());
    }

    /// Full authentication's RSA step, checked with a real RSA implementation:
    /// openssl generates a key, we encrypt with its public half, openssl
    /// decrypts with OAEP and must get back password^nonce. Skipped (with a
    /// note) when the openssl CLI is missing.
    #[test]
    fn rsa_oaep_password_decrypts_with_openssl() {
        let dir = std::env::temp_dir().join(format!("may-mysql-rsa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key.pem");
        let run = |args: &[&str]| {
            Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
        };
        let generated = run(&[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            "key.pem",
        ]);
        match generated {
            Ok(out) if out.status.success() => {}
            other => {
                eprintln!("skipping: openssl genpkey unavailable: {other:?}");
                let _ = std::fs::remove_dir_all(&dir);
                return;
            }
        }
        let public = run(&["pkey", "-in", "key.pem", "-pubout"]).unwrap();
        assert!(public.status.success());
        assert!(public.stdout.starts_with(b"-----BEGIN PUBLIC KEY-----"));

        // In a coroutine with may's default 32 KiB stack, as the servers run it.
        let pem = public.stdout.clone();
        let encrypted = may::go!(move || encrypt_password(PASSWORD, &NONCE, &pem))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(encrypted.len(), 256);
        std::fs::write(dir.join("enc.bin"), &encrypted).unwrap();
        let decrypted = run(&[
            "pkeyutl",
            "-decrypt",
            "-inkey",
            "key.pem",
            "-in",
            "enc.bin",
            "-pkeyopt",
            "rsa_padding_mode:oaep",
            "-pkeyopt",
            "rsa_oaep_md:sha1",
        ])
        .unwrap();
        let _ = std::fs::remove_file(key);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            decrypted.status.success(),
            "{}",
            String::from_utf8_lossy(&decrypted.stderr)
        );
        let expected: Vec<u8> = PASSWORD
            .bytes()
            .chain([0])
            .enumerate()
            .map(|(i, b)| b ^ NONCE[i % NONCE.len()])
            .collect();
        assert_eq!(decrypted.stdout, expected);
    }
}
