//! The binary payloads the scenarios ask for, base64-encoded: a 1x1 red PNG
//! (image content, the binary resource, the image prompt) and a short silent
//! 8 kHz mono WAV (audio content). Both are well-formed files, not placeholders.

/// A 1x1 red pixel, `image/png`.
pub const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
pub const PNG_MIME: &str = "image/png";

/// Eight samples of 16-bit silence, `audio/wav`.
pub const WAV_BASE64: &str =
    "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YRAAAAAAAAAAAAAAAAAAAAAAAAAA";
pub const WAV_MIME: &str = "audio/wav";
