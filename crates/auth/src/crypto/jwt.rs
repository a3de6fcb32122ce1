//! jsonwebtoken's signatures and digests on `ring`: every algorithm jsonwebtoken knows (HS,
//! RS, PS, ES256/384, EdDSA), as its own aws-lc-rs backend does them (`ring` has the same
//! API, which aws-lc-rs copied), so the binary carries one crypto library instead of two.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind, Result};
use jsonwebtoken::jwk::{EllipticCurve, ThumbprintHash};
use jsonwebtoken::signature::{self, Signer, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::rand::SystemRandom;
use ring::signature::{self as sig, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair};
use ring::{digest, hmac};

/// The provider [`super::install_crypto_providers`] installs.
pub(super) static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: new_signer,
    verifier_factory: new_verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: rsa_components_from_private_key,
        rsa_pub_components_from_public_key: rsa_components_from_public_key,
        ec_pub_components_from_private_key: ec_components_from_private_key,
        ed_pub_components_from_private_key,
        compute_digest,
    },
};

/// ring's errors say nothing (`Unspecified`); jsonwebtoken turns any into "invalid signature".
fn opaque<E>(_: E) -> signature::Error {
    signature::Error::new()
}

fn require(family: AlgorithmFamily, expected: AlgorithmFamily) -> Result<()> {
    if family == expected {
        Ok(())
    } else {
        Err(ErrorKind::InvalidKeyFormat.into())
    }
}

/// One algorithm's signing key, checked when the signer is made.
enum SigningKey {
    Hmac(hmac::Key),
    Rsa(RsaKeyPair, &'static dyn sig::RsaEncoding),
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
}

struct RingSigner {
    algorithm: Algorithm,
    key: SigningKey,
}

impl Signer<Vec<u8>> for RingSigner {
    fn try_sign(&self, msg: &[u8]) -> std::result::Result<Vec<u8>, signature::Error> {
        match &self.key {
            SigningKey::Hmac(key) => Ok(hmac::sign(key, msg).as_ref().to_vec()),
            SigningKey::Rsa(pair, padding) => {
                let mut out = vec![0; pair.public().modulus_len()];
                pair.sign(*padding, &SystemRandom::new(), msg, &mut out)
                    .map_err(opaque)?;
                Ok(out)
            }
            SigningKey::Ecdsa(pair) => Ok(pair
                .sign(&SystemRandom::new(), msg)
                .map_err(opaque)?
                .as_ref()
                .to_vec()),
            SigningKey::Ed25519(pair) => Ok(pair.sign(msg).as_ref().to_vec()),
        }
    }
}

impl JwtSigner for RingSigner {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

fn new_signer(algorithm: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    let bytes = key.as_bytes();
    let rsa = |padding: &'static dyn sig::RsaEncoding| -> Result<SigningKey> {
        require(key.family(), AlgorithmFamily::Rsa)?;
        let pair =
            RsaKeyPair::from_der(bytes).map_err(|e| ErrorKind::InvalidRsaKey(e.to_string()))?;
        Ok(SigningKey::Rsa(pair, padding))
    };
    let ecdsa = |alg: &'static sig::EcdsaSigningAlgorithm| -> Result<SigningKey> {
        require(key.family(), AlgorithmFamily::Ec)?;
        let pair = EcdsaKeyPair::from_pkcs8(alg, bytes, &SystemRandom::new())
            .map_err(|_| ErrorKind::InvalidEcdsaKey)?;
        Ok(SigningKey::Ecdsa(pair))
    };
    let hmac = |alg: hmac::Algorithm| -> Result<SigningKey> {
        require(key.family(), AlgorithmFamily::Hmac)?;
        Ok(SigningKey::Hmac(hmac::Key::new(alg, bytes)))
    };
    let key = match algorithm {
        Algorithm::HS256 => hmac(hmac::HMAC_SHA256)?,
        Algorithm::HS384 => hmac(hmac::HMAC_SHA384)?,
        Algorithm::HS512 => hmac(hmac::HMAC_SHA512)?,
        Algorithm::ES256 => ecdsa(&sig::ECDSA_P256_SHA256_FIXED_SIGNING)?,
        Algorithm::ES384 => ecdsa(&sig::ECDSA_P384_SHA384_FIXED_SIGNING)?,
        Algorithm::RS256 => rsa(&sig::RSA_PKCS1_SHA256)?,
        Algorithm::RS384 => rsa(&sig::RSA_PKCS1_SHA384)?,
        Algorithm::RS512 => rsa(&sig::RSA_PKCS1_SHA512)?,
        Algorithm::PS256 => rsa(&sig::RSA_PSS_SHA256)?,
        Algorithm::PS384 => rsa(&sig::RSA_PSS_SHA384)?,
        Algorithm::PS512 => rsa(&sig::RSA_PSS_SHA512)?,
        Algorithm::EdDSA => {
            require(key.family(), AlgorithmFamily::Ed)?;
            SigningKey::Ed25519(
                Ed25519KeyPair::from_pkcs8_maybe_unchecked(bytes)
                    .map_err(|_| ErrorKind::InvalidEddsaKey)?,
            )
        }
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    Ok(Box::new(RingSigner {
        algorithm: *algorithm,
        key,
    }))
}

/// One algorithm's verification key.
enum VerifyingKey {
    Hmac(hmac::Key),
    Public(&'static dyn sig::VerificationAlgorithm, DecodingKey),
    Rsa(&'static sig::RsaParameters, DecodingKey),
}

struct RingVerifier {
    algorithm: Algorithm,
    key: VerifyingKey,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, msg: &[u8], signature: &Vec<u8>) -> std::result::Result<(), signature::Error> {
        match &self.key {
            VerifyingKey::Hmac(key) => hmac::verify(key, msg, signature).map_err(opaque),
            VerifyingKey::Public(alg, key) => {
                let der = key.try_get_as_bytes().map_err(opaque)?;
                sig::UnparsedPublicKey::new(*alg, der)
                    .verify(msg, signature)
                    .map_err(opaque)
            }
            VerifyingKey::Rsa(params, key) => match key.kind() {
                DecodingKeyKind::SecretOrDer(der) => sig::UnparsedPublicKey::new(*params, der)
                    .verify(msg, signature)
                    .map_err(opaque),
                DecodingKeyKind::RsaModulusExponent { n, e } => {
                    sig::RsaPublicKeyComponents { n, e }
                        .verify(params, msg, signature)
                        .map_err(opaque)
                }
            },
        }
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

fn new_verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    let rsa = |params: &'static sig::RsaParameters| -> Result<VerifyingKey> {
        require(key.family(), AlgorithmFamily::Rsa)?;
        Ok(VerifyingKey::Rsa(params, key.clone()))
    };
    let public = |family, alg: &'static dyn sig::VerificationAlgorithm| -> Result<VerifyingKey> {
        require(key.family(), family)?;
        Ok(VerifyingKey::Public(alg, key.clone()))
    };
    let hmac = |alg: hmac::Algorithm| -> Result<VerifyingKey> {
        require(key.family(), AlgorithmFamily::Hmac)?;
        Ok(VerifyingKey::Hmac(hmac::Key::new(
            alg,
            key.try_get_as_bytes()?,
        )))
    };
    let key = match algorithm {
        Algorithm::HS256 => hmac(hmac::HMAC_SHA256)?,
        Algorithm::HS384 => hmac(hmac::HMAC_SHA384)?,
        Algorithm::HS512 => hmac(hmac::HMAC_SHA512)?,
        Algorithm::ES256 => public(AlgorithmFamily::Ec, &sig::ECDSA_P256_SHA256_FIXED)?,
        Algorithm::ES384 => public(AlgorithmFamily::Ec, &sig::ECDSA_P384_SHA384_FIXED)?,
        Algorithm::EdDSA => public(AlgorithmFamily::Ed, &sig::ED25519)?,
        Algorithm::RS256 => rsa(&sig::RSA_PKCS1_2048_8192_SHA256)?,
        Algorithm::RS384 => rsa(&sig::RSA_PKCS1_2048_8192_SHA384)?,
        Algorithm::RS512 => rsa(&sig::RSA_PKCS1_2048_8192_SHA512)?,
        Algorithm::PS256 => rsa(&sig::RSA_PSS_2048_8192_SHA256)?,
        Algorithm::PS384 => rsa(&sig::RSA_PSS_2048_8192_SHA384)?,
        Algorithm::PS512 => rsa(&sig::RSA_PSS_2048_8192_SHA512)?,
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        key,
    }))
}

fn rsa_components_from_private_key(der: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    let pair = RsaKeyPair::from_der(der).map_err(|e| ErrorKind::InvalidRsaKey(e.to_string()))?;
    let components = sig::RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
    Ok((components.n, components.e))
}

/// `n` and `e` of a PKCS#1 `RSAPublicKey` (`SEQUENCE { INTEGER, INTEGER }`, DER), which
/// ring checks in a signature but does not take apart.
fn rsa_components_from_public_key(der: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    let invalid = || Error::from(ErrorKind::InvalidRsaKey("not a DER RSAPublicKey".into()));
    let (tag, body, rest) = der_element(der).ok_or_else(invalid)?;
    if tag != 0x30 || !rest.is_empty() {
        return Err(invalid());
    }
    let (tag_n, n, rest) = der_element(body).ok_or_else(invalid)?;
    let (tag_e, e, rest) = der_element(rest).ok_or_else(invalid)?;
    if tag_n != 0x02 || tag_e != 0x02 || !rest.is_empty() {
        return Err(invalid());
    }
    let unsigned = |i: &[u8]| {
        let start = i.iter().position(|b| *b != 0).unwrap_or(i.len());
        i[start..].to_vec()
    };
    Ok((unsigned(n), unsigned(e)))
}

/// One DER element of `input`: its tag, its contents and what follows it.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, input) = input.split_first()?;
    let (&first, mut input) = input.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > size_of::<usize>() || input.len() < count {
            return None;
        }
        let (bytes, rest) = input.split_at(count);
        input = rest;
        bytes
            .iter()
            .fold(0usize, |len, b| (len << 8) | usize::from(*b))
    };
    if input.len() < len {
        return None;
    }
    let (body, rest) = input.split_at(len);
    Some((tag, body, rest))
}

fn ec_components_from_private_key(
    der: &[u8],
    alg: Algorithm,
) -> Result<(EllipticCurve, Vec<u8>, Vec<u8>)> {
    let (signing, curve, width) = match alg {
        Algorithm::ES256 => (
            &sig::ECDSA_P256_SHA256_FIXED_SIGNING,
            EllipticCurve::P256,
            32,
        ),
        Algorithm::ES384 => (
            &sig::ECDSA_P384_SHA384_FIXED_SIGNING,
            EllipticCurve::P384,
            48,
        ),
        _ => return Err(ErrorKind::InvalidEcdsaKey.into()),
    };
    let pair = EcdsaKeyPair::from_pkcs8(signing, der, &SystemRandom::new())
        .map_err(|_| ErrorKind::InvalidEcdsaKey)?;
    let public = pair.public_key().as_ref();
    if public.len() != 1 + 2 * width || public[0] != 4 {
        return Err(ErrorKind::InvalidEcdsaKey.into());
    }
    let (x, y) = public[1..].split_at(width);
    Ok((curve, x.to_vec(), y.to_vec()))
}

fn ed_pub_components_from_private_key(der: &[u8], curve: &EllipticCurve) -> Result<Vec<u8>> {
    match curve {
        EllipticCurve::Ed25519 => Ok(Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map_err(|_| ErrorKind::InvalidEddsaKey)?
            .public_key()
            .as_ref()
            .to_vec()),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    }
}

fn compute_digest(data: &[u8], hash: ThumbprintHash) -> Result<Vec<u8>> {
    let algorithm = match hash {
        ThumbprintHash::SHA256 => &digest::SHA256,
        ThumbprintHash::SHA384 => &digest::SHA384,
        ThumbprintHash::SHA512 => &digest::SHA512,
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    Ok(digest::digest(algorithm, data).as_ref().to_vec())
}
