//! jsonwebtoken on `ring`: each algorithm signs and verifies, refuses a wrong key and a
//! changed token, and the JWK helpers take keys apart.

use jsonwebtoken::jwk::{EllipticCurve, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use ring::rand::SystemRandom;
use ring::signature::{self, Ed25519KeyPair, KeyPair as _, RsaKeyPair};
use serde_json::{Value, json};

use super::install_crypto_providers;

/// A 2048-bit RSA key (PKCS#1 DER) made for this test with `openssl genrsa`.
const RSA_DER: &[u8] = include_bytes!("testdata/rsa-2048.der");

fn claims() -> Value {
    json!({ "sub": "alice", "exp": 4_102_444_800u64 })
}

/// Signs with `encoding`, checks with `decoding` and with `wrong` (refused), and a token
/// whose payload was changed (refused).
fn round_trip(alg: Algorithm, encoding: &EncodingKey, decoding: &DecodingKey, wrong: &DecodingKey) {
    install_crypto_providers();
    let token = encode(&Header::new(alg), &claims(), encoding).unwrap();
    let mut validation = Validation::new(alg);
    validation.validate_aud = false;
    let data = decode::<Value>(&token, decoding, &validation).unwrap();
    assert_eq!(data.claims["sub"], "alice", "{alg:?}");
    assert!(
        decode::<Value>(&token, wrong, &validation).is_err(),
        "{alg:?}: wrong key"
    );
    let mut parts: Vec<&str> = token.split('.').collect();
    let other = encode(
        &Header::new(alg),
        &json!({ "sub": "mallory", "exp": 4_102_444_800u64 }),
        encoding,
    )
    .unwrap();
    parts[1] = other.split('.').nth(1).unwrap();
    assert!(
        decode::<Value>(&parts.join("."), decoding, &validation).is_err(),
        "{alg:?}: changed"
    );
}

#[test]
fn hmac_signs_and_verifies() {
    for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
        round_trip(
            alg,
            &EncodingKey::from_secret(b"a secret of thirty-two bytes....."),
            &DecodingKey::from_secret(b"a secret of thirty-two bytes....."),
            &DecodingKey::from_secret(b"another secret"),
        );
    }
}

#[test]
fn rsa_signs_and_verifies_with_der_and_with_components() {
    let pair = RsaKeyPair::from_der(RSA_DER).unwrap();
    let public_der = pair.public().as_ref().to_vec();
    let components = signature::RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
    let (n, e) = (super::jwt::PROVIDER
        .key_utils
        .rsa_pub_components_from_public_key)(&public_der)
    .unwrap();
    assert_eq!((&n, &e), (&components.n, &components.e));
    let from_private = (super::jwt::PROVIDER
        .key_utils
        .rsa_pub_components_from_private_key)(RSA_DER)
    .unwrap();
    assert_eq!(from_private, (n.clone(), e.clone()));
    let wrong = DecodingKey::from_rsa_raw_components(&n[..n.len() - 1], &e);
    for alg in [
        Algorithm::RS256,
        Algorithm::RS384,
        Algorithm::RS512,
        Algorithm::PS256,
        Algorithm::PS384,
        Algorithm::PS512,
    ] {
        let encoding = EncodingKey::from_rsa_der(RSA_DER);
        round_trip(
            alg,
            &encoding,
            &DecodingKey::from_rsa_der(&public_der),
            &wrong,
        );
        round_trip(
            alg,
            &encoding,
            &DecodingKey::from_rsa_raw_components(&n, &e),
            &wrong,
        );
    }
}

#[test]
fn ecdsa_signs_and_verifies() {
    let rng = SystemRandom::new();
    for (alg, signing) in [
        (
            Algorithm::ES256,
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        ),
        (
            Algorithm::ES384,
            &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
        ),
    ] {
        let key = |_| {
            let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(signing, &rng).unwrap();
            let pair = signature::EcdsaKeyPair::from_pkcs8(signing, pkcs8.as_ref(), &rng).unwrap();
            (pkcs8.as_ref().to_vec(), pair.public_key().as_ref().to_vec())
        };
        let (private, public) = key(0);
        let (_, other) = key(1);
        round_trip(
            alg,
            &EncodingKey::from_ec_der(&private),
            &DecodingKey::from_ec_der(&public),
            &DecodingKey::from_ec_der(&other),
        );
        // The JWK of the key, as an issuer publishes it, verifies too.
        install_crypto_providers();
        let jwk = Jwk::from_encoding_key(&EncodingKey::from_ec_der(&private), alg).unwrap();
        let token = encode(
            &Header::new(alg),
            &claims(),
            &EncodingKey::from_ec_der(&private),
        )
        .unwrap();
        let mut validation = Validation::new(alg);
        validation.validate_aud = false;
        decode::<Value>(&token, &DecodingKey::from_jwk(&jwk).unwrap(), &validation).unwrap();
    }
}

#[test]
fn eddsa_signs_and_verifies() {
    let rng = SystemRandom::new();
    let key = || {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        (pkcs8.as_ref().to_vec(), pair.public_key().as_ref().to_vec())
    };
    let (private, public) = key();
    let (_, other) = key();
    round_trip(
        Algorithm::EdDSA,
        &EncodingKey::from_ed_der(&private),
        &DecodingKey::from_ed_der(&public),
        &DecodingKey::from_ed_der(&other),
    );
    let x = (super::jwt::PROVIDER
        .key_utils
        .ed_pub_components_from_private_key)(&private, &EllipticCurve::Ed25519)
    .unwrap();
    assert_eq!(x, public);
}

#[test]
fn a_key_of_another_family_is_refused() {
    install_crypto_providers();
    let hmac = EncodingKey::from_secret(b"secret");
    assert!(encode(&Header::new(Algorithm::RS256), &claims(), &hmac).is_err());
    let token = encode(&Header::new(Algorithm::HS256), &claims(), &hmac).unwrap();
    let validation = Validation::new(Algorithm::HS256);
    assert!(decode::<Value>(&token, &DecodingKey::from_ed_der(&[0; 32]), &validation).is_err());
}
