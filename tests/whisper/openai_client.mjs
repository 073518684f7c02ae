// The server through OpenAI's own Node.js client (the npm package openai, scripts/fetch-openai.sh):
// audio.transcriptions.create in each response format, audio.translations.create, and an upload
// that is not audio, which must surface as the client's APIError with status 400 and param "file".
// Each result is written to OUT/<format> as the client returns it (a string, or JSON).
//   node openai_client.mjs OPENAI_PACKAGE_DIR URL AUDIO NOT_AUDIO OUT
import fs from "node:fs";
import path from "node:path";

const [pkg, url, audio, notAudio, out] = process.argv.slice(2);
const { default: OpenAI } = await import(path.resolve(pkg, "index.mjs"));
const client = new OpenAI({ baseURL: url + "/v1", apiKey: "unused", maxRetries: 0 });

const save = (name, r) => fs.writeFileSync(path.join(out, name), typeof r === "string" ? r : JSON.stringify(r));
for (const format of ["json", "text", "srt", "vtt", "verbose_json"]) {
    const r = await client.audio.transcriptions.create({
        file: fs.createReadStream(audio),
        model: "whisper-1",
        language: "en",
        response_format: format,
    });
    save(format, r);
}
save("translation", await client.audio.translations.create({ file: fs.createReadStream(audio), model: "whisper-1" }));
try {
    await client.audio.transcriptions.create({ file: fs.createReadStream(notAudio), model: "whisper-1" });
    console.log("FAILED: the upload that is not audio was accepted");
    process.exit(1);
} catch (e) {
    if (!(e instanceof OpenAI.APIError) || e.status !== 400 || e.param !== "file") {
        console.log(`FAILED: not an APIError 400 on param file: ${e}`);
        process.exit(1);
    }
    save("bad", { status: e.status, param: e.param, message: e.message });
}
const { version } = JSON.parse(fs.readFileSync(path.resolve(pkg, "package.json")));
console.log(`openai ${version}: 5 response formats, a translation, a 400`);
