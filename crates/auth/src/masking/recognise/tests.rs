//! Tests of what looks secret.

use super::*;

#[test]
fn names_that_hold_a_secret() {
    for name in [
        "--token",
        "--api-key",
        "--apikey",
        "--password",
        "--passwd",
        "--secret",
        "--client-secret",
        "GITHUB_TOKEN",
        "GITHUB_PERSONAL_ACCESS_TOKEN",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "--auth",
        "--basic-auth",
        "Authorization",
        "x-api-key",
        "--key",
        "Cookie",
        "--private-key",
        "DB_CREDENTIALS",
    ] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in [
        "--port",
        "-t",
        "-k",
        "--dir",
        "--token-file",
        "--password-env",
        "--max-tokens",
        "--tokenizer",
        "--no-auth",
        "--no-token",
        "--author",
        "LOG_LEVEL",
        "",
        "--",
    ] {
        assert!(!is_secret_name(name), "{name}");
    }
}

#[test]
fn random_strings_are_told_from_names() {
    for random in [
        "Zx9Qw2Lm7Np4Rt6Vb8Kc3Hd5",
        "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7",
        "q8Hf2Kx9LmZ4Rt7VbNc3Wd6PyS1gTj5F",
        "AbC0dEf1GhI2jKl3MnO4pQr5StU6vWx7YzA8bCd9",
    ] {
        assert!(is_high_entropy(random), "{random}");
    }
    for name in [
        "TestProject2024ReleaseCandidate",
        "my-very-long-database-name-2024",
        "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        "123e4567-e89b-12d3-a456-426614174000",
        "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaA1",
        "Short9Xy",
        "/usr/local/lib/node_modules/Zx9Qw2Lm7Np4Rt6Vb8Kc3Hd5",
    ] {
        assert!(!is_high_entropy(name), "{name}");
    }
}
